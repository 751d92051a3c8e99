package sdkcheck

import (
	"encoding/json"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// ahpJSON renders canonical messages as they travel in events.
func ahpJSON(items []ahp.Message) ([]byte, error) { return json.Marshal(items) }

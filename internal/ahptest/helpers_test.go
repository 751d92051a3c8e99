package ahptest

import "encoding/json"

type jsonRaw = json.RawMessage

func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

package ahptest

import (
	"strings"
	"testing"
)

// beyondSchema are the cases whose expectedValid=false rests on a rule no JSON Schema can
// state: request id equal to event id, and one-line stdio framing.
var beyondSchema = map[string]bool{
	"http.intercept-request-id-mismatch.invalid": true,
	"stdio.intercept-request-multiline.invalid":  true,
}

// Every fixture of the manifest must come out of its own schema (plus eventSchema) exactly as
// expectedValid says; this proves the schema loading, $ref resolution and format assertions.
func TestManifestSchemaVerdicts(t *testing.T) {
	m := LoadManifest(t)
	if len(m.Cases) != 150 {
		t.Errorf("manifest has %d cases, want 150", len(m.Cases))
	}
	for i := range m.Cases {
		c := &m.Cases[i]
		data := ReadCase(t, c)
		if strings.HasSuffix(c.Path, ".jsonl") {
			// Schema verdicts concern the object; framing is the aggregate checker's job.
			data = []byte(strings.TrimSuffix(string(data), "\n"))
		}
		err := Validate(t, c.SchemaFile(), data)
		if c.EventSchema != "" && err == nil {
			err = validateEvent(t, c.EventSchema, data)
		}
		want := c.ExpectedValid || beyondSchema[c.ID]
		if got := err == nil; got != want {
			t.Errorf("%s: schema valid=%v, want %v (err: %v)", c.ID, got, want, err)
		}
	}
}

func validateEvent(t *testing.T, schema string, data []byte) error {
	// eventSchema applies to params.event of the message.
	var msg struct {
		Params struct {
			Event jsonRaw `json:"event"`
		} `json:"params"`
	}
	if err := unmarshal(data, &msg); err != nil {
		return err
	}
	return Validate(t, schema[strings.LastIndex(schema, "/")+1:], msg.Params.Event)
}

func TestValidateRejectsBadJSON(t *testing.T) {
	if err := Validate(t, "common.schema.json", []byte("{")); err == nil {
		t.Fatal("want error for truncated JSON")
	}
}

func TestSharedDir(t *testing.T) {
	if d := SharedDir(t); !strings.HasSuffix(d, "shared") {
		t.Fatalf("SharedDir = %q", d)
	}
}

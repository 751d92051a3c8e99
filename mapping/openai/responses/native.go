package responses

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// itemKind is what a native item (an entry of "input" or "output") is to the canonical view.
type itemKind uint8

const (
	itemMessage    itemKind = iota // "message" (or an easy input message without type)
	itemCall                       // a call item the client runs: function_call, custom_tool_call, ... (tools.go)
	itemCallOutput                 // its output: function_call_output, custom_tool_call_output, ...
	itemReasoning                  // "reasoning"
	itemOpaque                     // every other type: kept in place, never represented
)

// nativeItem is one original native item.
type nativeItem struct {
	raw        string // the item's JSON, byte for byte
	kind       itemKind
	typ        string   // native "type"; "" for an easy input message
	role       string   // message role
	msg        int      // index of its canonical message; -1 for opaque items
	parts      []string // ids of the canonical parts decoded from it, in order
	stringBody bool     // a message's content or a call output was a string
	callID     string   // call and call output items: the call id
}

// partSource says where in a native item a canonical part came from, which is where an
// edited part goes back to.
type partSource uint8

const (
	srcContentString partSource = iota // a message's content string
	srcContentEntry                    // an entry of a message's content array
	srcFileText                        // an input_file entry whose data is text
	srcOutputString                    // a function_call_output's output string
	srcOutputText                      // the joined text entries of an output array
	srcOutputEntry                     // a non-text entry of an output array
	srcShellOutput                     // the stdout and stderr texts of a shell_call_output
	srcMCPOutput                       // an mcp_call input item's output
	srcMCPError                        // an mcp_call input item's error
	srcScreenshot                      // the screenshot of a computer_call_output
	srcCurrentURL                      // a computer_call_output's current_url (raw: its path in the item)
	srcSummary                         // a reasoning item's summary entry
	srcReasoningText                   // a reasoning item's content entry
	srcEncrypted                       // a reasoning item's encrypted_content
	srcCall                            // a call item
	srcInstructions                    // the request's instructions string
)

// partOrigin is the native origin of one canonical part.
type partOrigin struct {
	item     int // native item index; -1 for the instructions
	src      partSource
	raw      string // the entry's JSON for array entries
	entry    string // the entry's type ("input_text", "refusal", ...)
	fileType string // srcFileText: the media type of its data URL
	canon    ahp.Part
	store    oaiwire.PartStore // what canon's pointer fields point to
}

// callOrigin is the native origin of one tool_call part.
type callOrigin struct {
	id, name string
	typ      string // the call item's type
	input    string // normalized JSON of the canonical input
	text     string // the tool_call part's text as decoded
}

// natives maps canonical parts back to native JSON, for requests and responses alike.
type natives struct {
	items   []nativeItem
	parts   map[string]*partOrigin // by part id
	calls   map[string]*callOrigin // by tool_call part id
	callIDs map[string]*callOrigin // by call id; the last call with that id
}

func newNatives() natives {
	return natives{parts: map[string]*partOrigin{}, calls: map[string]*callOrigin{}, callIDs: map[string]*callOrigin{}}
}

// addPart records the origin of p.
func (n *natives) addPart(p ahp.Part, o partOrigin) {
	o.canon = o.store.Clone(p)
	n.parts[p.ID] = &o
}

// unchanged returns the origin of p when p is exactly the part that was decoded.
func (n *natives) unchanged(p *ahp.Part) *partOrigin {
	if o := n.parts[p.ID]; o != nil && oaiwire.PartsEqual(&o.canon, p) {
		return o
	}
	return nil
}

// decoder reads native items into canonical parts. gaps collects what the canonical view
// cannot carry.
type decoder struct {
	n    *natives
	gaps []ahp.Gap
}

func (d *decoder) gap(reason string) { d.gaps = append(d.gaps, ahp.Gap{Path: "items", Reason: reason}) }

// content decodes a message's content (string, array of entries, or null) into parts
// appended to parts.
func (d *decoder) content(v gjson.Result, msgID string, parts []ahp.Part, item int, where string) ([]ahp.Part, bool, error) {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return parts, false, nil
	case v.Type == gjson.String:
		p := ahp.TextPart(partID(msgID, len(parts)), v.Str)
		d.n.addPart(p, partOrigin{item: item, src: srcContentString})
		return append(parts, p), true, nil
	case !v.IsArray():
		return nil, false, fmt.Errorf("%s: content is neither a string nor an array", where)
	}
	var err error
	v.ForEach(func(_, e gjson.Result) bool {
		var p ahp.Part
		if p, err = d.entry(e, partID(msgID, len(parts)), item, where); err == nil {
			parts = append(parts, p)
		}
		return err == nil
	})
	return parts, false, err
}

// entry decodes one entry of a content array (or a non-text entry of an output array).
func (d *decoder) entry(e gjson.Result, id string, item int, where string) (ahp.Part, error) {
	if !e.IsObject() {
		return ahp.Part{}, fmt.Errorf("%s: content entry is not an object", where)
	}
	typ := e.Get("type").String()
	o := partOrigin{item: item, src: srcContentEntry, raw: e.Raw, entry: typ}
	var p ahp.Part
	switch typ {
	case "input_text", "output_text", "text", "summary_text", "reasoning_text":
		t := e.Get("text")
		if t.Type != gjson.String {
			return ahp.Part{}, fmt.Errorf("%s: %s entry without a text string", where, typ)
		}
		p = ahp.TextPart(id, t.Str)
	case "refusal":
		t := e.Get("refusal")
		if t.Type != gjson.String {
			return ahp.Part{}, fmt.Errorf("%s: refusal entry without a refusal string", where)
		}
		p = ahp.TextPart(id, t.Str)
	case "input_image", "computer_screenshot":
		switch u, fid := e.Get("image_url"), e.Get("file_id"); {
		case u.Type == gjson.String && u.Str != "":
			if du, ok := oaiwire.ParseDataURL(u.Str); ok {
				p = oaiwire.MetadataAttachment(id, oaiwire.AttachmentType(du.MediaType, "image/*"), du)
			} else {
				p = oaiwire.GapAttachment(id, remoteType(u.Str, "image/*"), oaiwire.GapRemoteURL)
			}
		case fid.Type == gjson.String && fid.Str != "":
			p = oaiwire.GapAttachment(id, "image/*", oaiwire.GapProviderFile)
		default:
			return ahp.Part{}, fmt.Errorf("%s: %s entry without image_url or file_id", where, typ)
		}
	case "input_file":
		var err error
		if p, err = fileEntry(e, id, &o); err != nil {
			return ahp.Part{}, fmt.Errorf("%s: %w", where, err)
		}
	case "input_audio":
		data := e.Get("input_audio.data")
		if data.Type != gjson.String {
			return ahp.Part{}, fmt.Errorf("%s: input_audio entry without data", where)
		}
		du, _ := oaiwire.InlineData(data.Str)
		p = oaiwire.MetadataAttachment(id, oaiwire.AudioType(e.Get("input_audio.format").String()), du)
	default:
		// Content the canonical view cannot carry is named, not dropped: an opaque
		// attachment keeps its place (and its bytes on the way back) and a gap says why.
		p = ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: oaiwire.MediaOctetStream, Selection: ahp.SelectionMetadata}
		d.gap(fmt.Sprintf("part %s: content entry type %q not represented", id, typ))
	}
	d.n.addPart(p, o)
	return p, nil
}

// fileEntry decodes an input_file entry: inline data (a data URL or bare base64), a
// provider-held file_id, or a remote file_url.
func fileEntry(e gjson.Result, id string, o *partOrigin) (ahp.Part, error) {
	name := e.Get("filename").String()
	if fd := e.Get("file_data"); fd.Type == gjson.String && fd.Str != "" {
		p, _, textType := oaiwire.FileData(id, fd.Str, oaiwire.TypeFromName(name))
		if textType != "" {
			o.src, o.fileType = srcFileText, textType
		}
		return p, nil
	}
	if fid := e.Get("file_id"); fid.Type == gjson.String && fid.Str != "" {
		return oaiwire.GapAttachment(id, oaiwire.AttachmentType(oaiwire.TypeFromName(name), oaiwire.MediaOctetStream), oaiwire.GapProviderFile), nil
	}
	if fu := e.Get("file_url"); fu.Type == gjson.String && fu.Str != "" {
		return oaiwire.GapAttachment(id, remoteType(fu.Str, oaiwire.AttachmentType(oaiwire.TypeFromName(name), oaiwire.MediaOctetStream)), oaiwire.GapRemoteURL), nil
	}
	return ahp.Part{}, fmt.Errorf("input_file entry without file_data, file_id or file_url")
}

// itemCallID is a call item's canonical id: its call_id, else its id, else fallbackID.
func itemCallID(it gjson.Result, fallbackID string) string {
	if id := it.Get("call_id").String(); id != "" {
		return id
	}
	if id := it.Get("id").String(); id != "" {
		return id
	}
	return fallbackID
}

// call decodes a call item of type typ (tools.go) into a tool_call part. fallbackID names
// a call whose call_id is missing (tolerated in upstream responses only).
func (d *decoder) call(it gjson.Result, typ, id string, item int, fallbackID, where string) (ahp.Part, error) {
	callID := itemCallID(it, fallbackID)
	if callID == "" {
		return ahp.Part{}, fmt.Errorf("%s: %s without call_id", where, typ)
	}
	name, input, gap, err := callInput(it, typ, callID)
	if err != nil {
		return ahp.Part{}, fmt.Errorf("%s: %w", where, err)
	}
	if gap != "" {
		d.gap(gap)
	}
	p := mapping.ToolCallPart(id, mapping.ToolCall{ID: callID, Name: name, Input: json.RawMessage(input)})
	d.n.addPart(p, partOrigin{item: item, src: srcCall})
	c := &callOrigin{id: callID, name: name, typ: typ, input: input, text: p.TextOf()}
	d.n.calls[p.ID] = c
	d.n.callIDs[callID] = c
	return p, nil
}

// reasoning decodes a reasoning item: each summary and content text becomes a reasoning
// part; encrypted content becomes a metadata reasoning part, so that its presence is
// known without inventing text for it.
func (d *decoder) reasoning(it gjson.Result, msgID string, parts []ahp.Part, item int, where string) ([]ahp.Part, error) {
	for _, f := range [...]struct {
		field string
		src   partSource
	}{{"summary", srcSummary}, {"content", srcReasoningText}} {
		v := it.Get(f.field)
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		if !v.IsArray() {
			return nil, fmt.Errorf("%s: reasoning %s is not an array", where, f.field)
		}
		var err error
		v.ForEach(func(_, e gjson.Result) bool {
			t := e.Get("text")
			if !e.IsObject() || t.Type != gjson.String {
				err = fmt.Errorf("%s: reasoning %s entry without a text string", where, f.field)
				return false
			}
			p := oaiwire.TextPart(partID(msgID, len(parts)), t.Str, ahp.CategoryReasoning)
			d.n.addPart(p, partOrigin{item: item, src: f.src, raw: e.Raw, entry: e.Get("type").String()})
			parts = append(parts, p)
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	if enc := it.Get("encrypted_content"); enc.Type == gjson.String && enc.Str != "" {
		p := ahp.Part{ID: partID(msgID, len(parts)), Kind: ahp.KindText, MediaType: ahp.MediaTypeText,
			Selection: ahp.SelectionMetadata, Category: ahp.CategoryReasoning}
		d.n.addPart(p, partOrigin{item: item, src: srcEncrypted})
		parts = append(parts, p)
	}
	return parts, nil
}

// output decodes a function_call_output's output: one text part with category tool_result
// holding the string (or the text entries joined), then any non-text entries.
func (d *decoder) output(v gjson.Result, msgID string, item int, where string) ([]ahp.Part, bool, error) {
	if v.Type == gjson.String || !v.Exists() || v.Type == gjson.Null {
		p := oaiwire.TextPart(partID(msgID, 0), v.Str, ahp.CategoryToolResult)
		d.n.addPart(p, partOrigin{item: item, src: srcOutputString})
		return []ahp.Part{p}, true, nil
	}
	if !v.IsArray() {
		return nil, false, fmt.Errorf("%s: output is neither a string nor an array", where)
	}
	var text strings.Builder
	parts := []ahp.Part{{}} // slot 0 is the joined text
	var err error
	v.ForEach(func(_, e gjson.Result) bool {
		if typ := e.Get("type").String(); e.IsObject() && (typ == "input_text" || typ == "output_text" || typ == "text") {
			t := e.Get("text")
			if t.Type != gjson.String {
				err = fmt.Errorf("%s: %s entry without a text string", where, typ)
				return false
			}
			text.WriteString(t.Str)
			return true
		}
		var p ahp.Part
		if p, err = d.entry(e, partID(msgID, len(parts)), item, where); err != nil {
			return false
		}
		d.n.parts[p.ID].src = srcOutputEntry
		parts = append(parts, p)
		return true
	})
	if err != nil {
		return nil, false, err
	}
	parts[0] = oaiwire.TextPart(partID(msgID, 0), text.String(), ahp.CategoryToolResult)
	d.n.addPart(parts[0], partOrigin{item: item, src: srcOutputText})
	return parts, false, nil
}

// shellOutput decodes a shell_call_output's output chunks: one text part with category
// tool_result holding their stdout and stderr (shellOutputText).
func (d *decoder) shellOutput(v gjson.Result, msgID string, item int, where string) ([]ahp.Part, error) {
	if v.Exists() && v.Type != gjson.Null && !v.IsArray() {
		return nil, fmt.Errorf("%s: shell_call_output output is not an array", where)
	}
	p := oaiwire.TextPart(partID(msgID, 0), shellOutputText(v), ahp.CategoryToolResult)
	d.n.addPart(p, partOrigin{item: item, src: srcShellOutput})
	return []ahp.Part{p}, nil
}

// screenshot decodes a computer_call_output's output, a computer_screenshot, as an image
// attachment (metadata for a data URL, a gap for a URL or a file id), and the page's
// current_url — which a browser harness sends beside the screenshot, in the output
// object or on the item — as tool_result text a policy reads (a URL can carry a token or
// a password) and may rewrite.
func (d *decoder) screenshot(it gjson.Result, msgID string, item int, where string) ([]ahp.Part, error) {
	p, err := d.entry(it.Get("output"), partID(msgID, 0), item, where)
	if err != nil {
		return nil, err
	}
	d.n.parts[p.ID].src = srcScreenshot
	parts := []ahp.Part{p}
	for _, path := range currentURLPaths {
		if u := it.Get(path); u.Type == gjson.String {
			t := oaiwire.TextPart(partID(msgID, len(parts)), u.Str, ahp.CategoryToolResult)
			d.n.addPart(t, partOrigin{item: item, src: srcCurrentURL, raw: path})
			parts = append(parts, t)
		}
	}
	return parts, nil
}

// currentURLPaths are where a computer_call_output carries the page URL.
var currentURLPaths = [...]string{"output.current_url", "current_url"}

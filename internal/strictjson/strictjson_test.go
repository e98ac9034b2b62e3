package strictjson_test

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/axsched/ax/internal/strictjson"
	"github.com/axsched/ax/store"
)

// body is an admin action's body.
type body struct {
	Reason string     `json:"reason,omitempty"`
	At     *time.Time `json:"at,omitempty"`
}

// dispatch is the executor's dispatch body: tasks as the store keeps them, with no
// JSON tags, times, durations and bytes.
type dispatch struct {
	Namespace string       `json:"namespace"`
	Token     int64        `json:"token"`
	Tasks     []store.Task `json:"tasks"`
}

// Base and Outer exercise embedded structs: promoted fields, a tagged field that
// dominates, and an ambiguous name that is nobody's.
type Base struct {
	ID   int    `json:"id"`
	Note string // "Note"
	Dup  string // ambiguous with Other.Dup: no field
}

type Other struct {
	Dup  string
	Name string `json:"name"`
}

type inner struct{ Hidden int }

type Outer struct {
	Base
	*Other
	inner           // unexported, but its exported fields are promoted
	Name     string `json:"name"` // shallower: dominates Other's
	Skip     int    `json:"-"`
	Dash     int    `json:"-,"`
	Labels   map[string]int
	Any      any
	Raw      json.RawMessage
	Numbers  [2]int
	Period   time.Duration
	Payload  []byte
	Quoted   int `json:",string"`
	Children []*Outer
}

func TestUnmarshalAccepts(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, in string
		into     any // a pointer to a zero value
		want     any
	}{
		{"an action body", `{"reason":"the customer called","at":"2026-12-06T10:00:00Z"}`, new(body), &body{Reason: "the customer called", At: &at}},
		{"an empty object", ` {} `, new(body), &body{}},
		{"null", `null`, new(body), &body{}},
		{"null members", `{"reason":null,"at":null}`, new(body), &body{}},
		{"white space after", "{}\n\t ", new(body), &body{}},
		{"a dispatch", `{"namespace":"default","token":7,"tasks":[{"ID":1,"Name":"job","Payload":"aGk=","DueAt":"2026-12-06T10:00:00Z",` +
			`"Timeout":1500000000,"Backoff":[1000000000,2000000000],"Status":"DISPATCHING","KeyUntil":"0001-01-01T00:00:00Z"}]}`, new(dispatch),
			&dispatch{Namespace: "default", Token: 7, Tasks: []store.Task{{ID: 1, Name: "job", Payload: []byte("hi"), DueAt: at,
				Timeout: 1500 * time.Millisecond, Backoff: []time.Duration{time.Second, 2 * time.Second}, Status: store.Dispatching}}}},
		{"embedded, maps, any, raw", `{"id":3,"Note":"n","Hidden":4,"name":"top","-":5,"Labels":{"a":1,"A":2},` +
			`"Any":{"x":[{"y":1},{"y":2}]},"Raw":{"d":1,"d":2},"Numbers":[1,2],"Period":60,"Payload":[104,105],"Quoted":"12",` +
			`"Children":[{"name":"kid","Children":null}]}`, new(Outer),
			&Outer{Base: Base{ID: 3, Note: "n"}, inner: inner{Hidden: 4}, Name: "top", Dash: 5, Labels: map[string]int{"a": 1, "A": 2},
				Any: map[string]any{"x": []any{map[string]any{"y": 1.0}, map[string]any{"y": 2.0}}}, Raw: json.RawMessage(`{"d":1,"d":2}`),
				Numbers: [2]int{1, 2}, Period: 60, Payload: []byte("hi"), Quoted: 12, Children: []*Outer{{Name: "kid"}}}},
		{"a map of structs", `{"a":{"reason":"x"},"b":{}}`, new(map[string]body), &map[string]body{"a": {Reason: "x"}, "b": {}}},
		{"a huge number into raw", `{"Raw":1e400}`, new(Outer), &Outer{Raw: json.RawMessage(`1e400`)}},
	} {
		if err := strictjson.Unmarshal([]byte(c.in), c.into); err != nil {
			t.Errorf("%s: Unmarshal(%s) = %v, want nil", c.name, c.in, err)
			continue
		}
		if diff := cmp.Diff(c.want, c.into, cmp.AllowUnexported(Outer{})); diff != "" {
			t.Errorf("%s: Unmarshal(%s): (-want +got)\n%s", c.name, c.in, diff)
		}
	}
}

func TestUnmarshalRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in string
		into     any
		want     string // in the message
	}{
		{"a duplicate member", `{"reason":"a","reason":"b"}`, new(body), `duplicate member "reason"`},
		{"a duplicate by escape", `{"reason":"a","\u0072eason":"b"}`, new(body), `duplicate member "reason"`},
		{"a duplicate in a slice's element", `{"tasks":[{},{"ID":1,"ID":2}]}`, new(dispatch), `duplicate member "ID" in tasks[1]`},
		{"a duplicate in a map", `{"Labels":{"a":1,"a":2}}`, new(Outer), `duplicate member "a" in Labels`},
		{"a duplicate deep in an any", `{"Any":{"x":[{"y":1,"y":2}]}}`, new(Outer), `duplicate member "y" in Any.x[0]`},
		{"a duplicate in a top-level any", `[{"k":1,"k":1}]`, new(any), `duplicate member "k" in [0]`},
		{"a name in another case", `{"Reason":"x"}`, new(body), `member "Reason" matches field "reason" only when case is ignored`},
		{"a nested name in another case", `{"tasks":[{"name":"job"}]}`, new(dispatch), `member "name" matches field "Name" only when case is ignored in tasks[0]`},
		{"an unknown member", `{"reason":"x","force":true}`, new(body), `unknown member "force"`},
		{"an ambiguous embedded name", `{"Dup":"x"}`, new(Outer), `unknown member "Dup"`},
		{"a field tagged -", `{"Skip":1}`, new(Outer), `unknown member "Skip"`},
		{"an unexported field", `{"inner":{}}`, new(Outer), `unknown member "inner"`},
		{"two values", `{} {}`, new(body), "data after the top-level value"},
		{"trailing garbage", `{"reason":"x"} x`, new(body), "data after the top-level value"},
		{"nothing", ``, new(body), "unexpected end of JSON input"},
		{"a cut object", `{"reason":`, new(body), "unexpected end of JSON input"},
		{"malformed", `{"reason" "x"}`, new(body), "json: invalid character"},
		{"malformed, then data after", `{"reason":tru} x`, new(body), "json: invalid character '}' in literal true"},
		{"a wrong type", `{"reason":1}`, new(body), "json: cannot unmarshal number"},
		{"a bad time", `{"at":"yesterday"}`, new(body), `json: parsing time "yesterday"`},
		{"a weird name, quoted", `{"a\u0000\u202eb":1}`, new(body), `unknown member "a\x00\u202eb"`},
		{"a long name, cut", `{"` + strings.Repeat("n", 100) + `":1}`, new(body), `unknown member "` + strings.Repeat("n", 64) + `"…`},
		{"a weird path, quoted", `{"Labels":{}, "Any":{"a.b":{"c":1,"c":1}}}`, new(Outer), `duplicate member "c" in Any["a.b"]`},
		{"an empty name in the path", `{"Any":{"":{"c":1,"c":1}}}`, new(Outer), `duplicate member "c" in Any[""]`},
		{"too deep", strings.Repeat("[", strictjson.MaxDepth+1) + strings.Repeat("]", strictjson.MaxDepth+1), new(any), "nested over 10000 levels"},
		{"too deep, skipped", `{"Raw":` + strings.Repeat("[", strictjson.MaxDepth+1) + strings.Repeat("]", strictjson.MaxDepth+1) + `}`, new(Outer), "nested over 10000 levels"},
	} {
		before := reflect.ValueOf(c.into).Elem().Interface()
		err := strictjson.Unmarshal([]byte(c.in), c.into)
		if !errors.Is(err, strictjson.ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "json: ") {
			t.Errorf("%s: Unmarshal(%.80s) = %v, want ErrInvalid with %q", c.name, c.in, err, c.want)
		}
		if strings.Contains(c.want, "member") && !reflect.DeepEqual(before, reflect.ValueOf(c.into).Elem().Interface()) {
			t.Errorf("%s: Unmarshal(%s) refused but set %+v", c.name, c.in, c.into)
		}
	}
	var syntax *json.SyntaxError
	if err := strictjson.Unmarshal([]byte(`{"reason" "x"}`), new(body)); !errors.As(err, &syntax) {
		t.Errorf("Unmarshal of malformed JSON = %v, want a *json.SyntaxError inside", err)
	}
	var notPointer *json.InvalidUnmarshalError
	if err := strictjson.Unmarshal([]byte(`{}`), body{}); !errors.As(err, &notPointer) || errors.Is(err, strictjson.ErrInvalid) {
		t.Errorf("Unmarshal into a non-pointer = %v, want *json.InvalidUnmarshalError", err)
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	var b body
	if err := strictjson.Decode(strings.NewReader(`{"reason":"x"}`), 14, &b); err != nil || b.Reason != "x" {
		t.Errorf("Decode of 14 bytes, at most 14 = %v, %+v", err, b)
	}
	if err := strictjson.Decode(strings.NewReader(`{"reason":"x"}`), 13, &b); !errors.Is(err, strictjson.ErrTooLarge) {
		t.Errorf("Decode of 14 bytes, at most 13 = %v, want ErrTooLarge", err)
	}
	if err := strictjson.Decode(strings.NewReader(" \r\n\t"), 100, &b); err != io.EOF {
		t.Errorf("Decode of white space = %v, want io.EOF", err)
	}
	if err := strictjson.Decode(strings.NewReader(`{"reason":"x","reason":"y"}`), 100, &b); !errors.Is(err, strictjson.ErrInvalid) {
		t.Errorf("Decode of a duplicate = %v, want ErrInvalid", err)
	}
	broken := errors.New("connection reset")
	if err := strictjson.Decode(iotest.ErrReader(broken), 100, &b); err != broken {
		t.Errorf("Decode of a failing reader = %v, want its error", err)
	}
}

// strictPhrases are the messages of the package's own refusals: an input that
// encoding/json accepts is refused only with one of them.
var strictPhrases = []string{"duplicate member", "only when case is ignored", "unknown member", "after the top-level value", "nested over"}

// FuzzUnmarshal compares Unmarshal with json.Unmarshal: what it accepts, encoding/json
// accepts too (unknown fields disallowed) and decodes to the same value; what it
// refuses is ErrInvalid, and for one of its own reasons when encoding/json accepts it.
func FuzzUnmarshal(f *testing.F) {
	for _, seed := range []string{`{}`, `null`, `{"id":1,"Note":"x","Hidden":2,"name":"n"}`, `{"Labels":{"a":1}}`, `{"Any":[1,"x",{"a":null}]}`,
		`{"Raw":{"a":1,"a":1}}`, `{"Children":[{"Children":[{}]}]}`, `{"Period":5,"Payload":"aGk="}`, `{"Quoted":"3"}`, `{"Numbers":[1,2,3]}`,
		`{"name":"a","NAME":"b"}`, `{"id":1,"id":2}`, `{} []`, `{"Dup":1}`, `{"-":1}`, `{"Any":{"k":1,"k":2}}`, `[`, `{"Raw":1e999}`,
		`{"tasks":[{"ID":1,"DueAt":"2026-01-01T00:00:00Z","Backoff":[1]}]}`, `{"id":"x"}`, "\xff", `{"\ufffd":1}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, zero := range []func() any{func() any { return new(Outer) }, func() any { return new(dispatch) }, func() any { return new(any) }} {
			strict, loose, disallow := zero(), zero(), zero()
			err := strictjson.Unmarshal([]byte(in), strict)
			jerr := json.Unmarshal([]byte(in), loose)
			dec := json.NewDecoder(strings.NewReader(in))
			dec.DisallowUnknownFields()
			derr := dec.Decode(disallow)
			if err == nil {
				if jerr != nil || derr != nil {
					t.Fatalf("Unmarshal(%q, %T) accepted what encoding/json refuses: %v / %v", in, strict, jerr, derr)
				}
				if !reflect.DeepEqual(strict, loose) {
					t.Fatalf("Unmarshal(%q, %T) = %+v, encoding/json %+v", in, strict, strict, loose)
				}
				continue
			}
			if !errors.Is(err, strictjson.ErrInvalid) {
				t.Fatalf("Unmarshal(%q, %T) = %v, not ErrInvalid", in, strict, err)
			}
			if jerr == nil && !containsAny(err.Error(), strictPhrases) {
				t.Fatalf("Unmarshal(%q, %T) = %v, which encoding/json accepts, for no reason of the package's", in, strict, err)
			}
		}
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestUnmarshalExtensible: members that name no field, scalars or nested values, are
// ignored as encoding/json ignores them; a name in another case, a duplicate (among
// the ignored ones too) and trailing data are still refused.
func TestUnmarshalExtensible(t *testing.T) {
	t.Parallel()
	var d dispatch
	in := `{"tasks":[{"ID":1,"Name":"job","Later":{"x":[1,{"y":2}]}}],"added":true}`
	if err := strictjson.UnmarshalExtensible([]byte(in), &d); err != nil || len(d.Tasks) != 1 || d.Tasks[0].ID != 1 {
		t.Fatalf("UnmarshalExtensible(%s) = %+v, %v; want task 1", in, d, err)
	}
	for _, c := range []struct{ in, want string }{
		{`{"tasks":[{"name":"job"}]}`, `member "name" matches field "Name" only when case is ignored`},
		{`{"added":1,"added":2}`, `duplicate member "added"`},
		{`{"tasks":[{"ID":1,"ID":2}]}`, `duplicate member "ID"`},
		{`{"added":{"y":1,"y":2}}`, ""}, // inside an ignored value: json.Unmarshal never reads it
		{`{} x`, "data after the top-level value"},
	} {
		err := strictjson.UnmarshalExtensible([]byte(c.in), new(dispatch))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("UnmarshalExtensible(%s) = %v, want nil", c.in, err)
		case c.want != "" && (!errors.Is(err, strictjson.ErrInvalid) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("UnmarshalExtensible(%s) = %v, want ErrInvalid with %q", c.in, err, c.want)
		}
	}
}

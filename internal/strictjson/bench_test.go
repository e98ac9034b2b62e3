package strictjson_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/internal/strictjson"
	"github.com/axsched/ax/store"
)

func benchBody(b *testing.B, n int) []byte {
	d := dispatch{Namespace: "default", Token: 3}
	for i := range n {
		d.Tasks = append(d.Tasks, store.Task{ID: int64(i + 1), Name: "bench.noop", Key: "k-000123", Payload: []byte(`{"order":42}`), Status: store.Dispatching,
			DueAt: time.Now(), ExecutionID: "01900000-0000-7000-8000-000000000001", OwnerService: "bench", CreatedAt: time.Now(), UpdatedAt: time.Now(), DispatchedAt: time.Now()})
	}
	body, err := json.Marshal(d)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// wideBody is a dispatch body with n members a newer peer might add: 100,000 are 1.3 MB.
func wideBody(n int) []byte {
	body := []byte(`{"namespace":"default","token":3,"tasks":[]`)
	for i := range n {
		body = fmt.Appendf(body, `,"added%06d":1`, i)
	}
	return append(body, '}')
}

// BenchmarkDecodeDispatch decodes dispatch bodies of 20 and 1,000 tasks, and one of
// 100,000 members UnmarshalExtensible ignores, with encoding/json and with strictjson.
func BenchmarkDecodeDispatch(b *testing.B) {
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"size=20", benchBody(b, 20)},
		{"size=1000", benchBody(b, 1000)},
		{"wide=100k", wideBody(100_000)},
	} {
		b.Run(c.name+"/std", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				var d dispatch
				if err := json.Unmarshal(c.body, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/strict", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				var d dispatch
				if err := strictjson.UnmarshalExtensible(c.body, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

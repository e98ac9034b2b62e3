package strictjson_test

import (
	"encoding/json"
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

func BenchmarkDecodeDispatch(b *testing.B) {
	body := benchBody(b, 20)
	b.Run("std", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var d dispatch
			if err := json.Unmarshal(body, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var d dispatch
			if err := strictjson.UnmarshalExtensible(body, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package queues_test

import (
	"fmt"
	"testing"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// BenchmarkPushDrain: one producer pushes envelopes, the consumer drains
// them in batches of 1024.
func BenchmarkPushDrain(b *testing.B) {
	q := queues.New[queues.Envelope, struct{}](0)
	env := queues.Envelope{Target: grain.NewIntID("k", 1), Msg: &struct{}{}}
	b.ReportAllocs()
	var ctl []struct{}
	for i := 0; b.Loop(); i++ {
		_ = q.Push(env)
		if i%1024 == 1023 {
			var batch queues.Batch[queues.Envelope, struct{}]
			batch, ctl = q.Drain(ctl[:0])
			for {
				if _, ok := batch.Pop(); !ok {
					break
				}
			}
		}
	}
}

// BenchmarkPushParallel: producers on every P push to one queue.
func BenchmarkPushParallel(b *testing.B) {
	q := queues.New[queues.Envelope, struct{}](0)
	env := queues.Envelope{Target: grain.NewIntID("k", 1)}
	done := make(chan struct{})
	go func() { // the consumer
		var ctl []struct{}
		for {
			select {
			case <-done:
				return
			case <-q.Wake():
			}
			var batch queues.Batch[queues.Envelope, struct{}]
			batch, ctl = q.Drain(ctl[:0])
			for {
				if _, ok := batch.Pop(); !ok {
					break
				}
			}
		}
	}()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = q.Push(env)
		}
	})
	close(done)
}

func BenchmarkHash(b *testing.B) {
	ids := []grain.ID{grain.NewIntID("counter", 42), grain.NewID("player", "player-4242-abcdef")}
	for _, id := range ids {
		b.Run(id.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = id.Hash()
			}
		})
	}
}

// BenchmarkEnvelopeWire: a tell from a grain to a string-keyed grain, with a
// 16-byte message, encoded into a reused buffer and decoded.
func BenchmarkEnvelopeWire(b *testing.B) {
	env := queues.Envelope{
		Target: grain.NewID("player", "p-000042"),
		Msg:    "0123456789abcdef",
		Meta:   &queues.Meta{Sender: grain.NewID("lobby", "main")},
	}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = queues.AppendEnvelope(buf[:0], &env, stringEnc)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("decode", func(b *testing.B) {
		frame, err := queues.AppendEnvelope(nil, &env, stringEnc)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, err := queues.DecodeEnvelope(frame, stringDec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPushDrainOneARound: a push, then a Drain that takes it alone,
// as an owner whose grains tell each other one message at a time.
func BenchmarkPushDrainOneARound(b *testing.B) {
	q := queues.New[queues.Envelope, struct{}](0)
	env := queues.Envelope{Target: grain.NewIntID("k", 1), Msg: &struct{}{}}
	b.ReportAllocs()
	var ctl []struct{}
	for b.Loop() {
		_ = q.Push(env)
		var batch queues.Batch[queues.Envelope, struct{}]
		batch, ctl = q.Drain(ctl[:0])
		for {
			if _, ok := batch.Pop(); !ok {
				break
			}
		}
	}
}

// BenchmarkDrainAppendLongBatch is a push and an append onto a batch that
// is not read, as an owner's batch through a backlog: the same cost at any
// length (a walk to the batch's end made it grow with the backlog).
func BenchmarkDrainAppendLongBatch(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("msgs=%d", n), func(b *testing.B) {
			q := queues.New[queues.Envelope, int](0)
			var env queues.Envelope
			batch, _ := q.Drain(nil)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for range n {
					_ = q.Push(env)
				}
				q.DrainAppend(&batch)
				if i%100_000 == 99_999 {
					batch, _ = q.Drain(nil) // let go of what was taken
				}
			}
		})
	}
}

package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/securemsg/storage/client"
)

// BenchmarkFirstContactFlood measures what a first contact costs the
// client, each envelope a genuine initiation from a new address with an
// identity of its own: "held" while fewer than Config.MaxFirstContacts are
// held (the key agreement, the pin, session and message committed), and
// "refused" once they are (refused before any key agreement, nothing
// written). The second is what an injector's flood costs past the bound:
//
//	go test -run '^$' -bench FirstContactFlood -benchtime 100000x ./client/
func BenchmarkFirstContactFlood(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		want error
	}{{"held", nil}, {"refused", client.ErrFirstContactLimit}} {
		b.Run(tc.name, func(b *testing.B) {
			net, _, d := openPair(b, sqliteKind)
			cfg := d.config()
			cfg.MaxFirstContacts = 1
			if tc.want == nil {
				cfg.MaxFirstContacts = b.N + 1
			}
			d.reopenWith(cfg)
			_, envs := strangers(b, net, b.N+1, "flood")
			if _, err := d.c.Receive(ctx, envs[0]); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for _, raw := range envs[1:] {
				if _, err := d.c.Receive(ctx, raw); !errors.Is(err, tc.want) {
					b.Fatalf("%v, want %v", err, tc.want)
				}
			}
		})
	}
}

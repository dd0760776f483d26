package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/testkit/leakcheck"
	"github.com/securemsg/storage/store"
)

// A client prints and logs redacted: the identity, prekeys and sessions
// it holds in memory show under no verb (fmt would walk its unexported
// fields, and print a pointer's target under %s); its configuration logs
// with both slog handlers as a group of its settings.
func TestClientNeverPrints(t *testing.T) {
	ctx := context.Background()
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			converse(t, a, b)
			li, err := b.st.LocalIdentity(ctx)
			require.NoError(t, err)
			// The identity's seed and X25519 key, after the 4-byte length and
			// its version byte (client.encodeLocal, Identity.MarshalBinary).
			secrets := [][]byte{li.Secret[5:37], li.Secret[37:69]}
			out := leakcheck.Everywhere(t, b.c, secrets...)
			require.Equal(t, "client.Client(bob/1, redacted)", out)
			type holder struct{ c *client.Client }
			for _, verb := range leakcheck.Verbs {
				leakcheck.RequireNoLeak(t, fmt.Sprintf(verb, holder{b.c}), secrets...)
			}
		})
	}
}

func TestConfigLogs(t *testing.T) {
	_, a := openAlice(t, memKind)
	cfg := a.config()
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			slog.New(h(&buf)).Info("open", "cfg", cfg)
			out := buf.String()
			require.NotContains(t, out, "!ERROR", out)
			require.Contains(t, out, "memstore.Store")
			require.Contains(t, out, "OneTimePrekeys")
			require.Equal(t, 1, strings.Count(out, "\n"))
			if name == "json" {
				var rec map[string]any
				require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
				require.Equal(t, map[string]any{
					"Store": "*memstore.Store", "Transport": "*transporttest.Network", "Directory": "*transporttest.Network",
					"OneTimePrekeys": float64(5), "OneTimePrekeyThreshold": float64(0), "SignedPrekeyGrace": float64(0),
					"MaxFirstContacts": float64(1 << 20), "MaxFirstContactPending": float64(1 << 20),
					"Now": false, "EncryptPolicy": "*client_test.refusingPolicy",
				}, rec["cfg"])
			}
		})
	}
}

// A received message, and the pages of messages pending either way,
// print and log redacted (what names the message and the plaintext's
// length) and refuse json and gob, on both stores; the Plaintext field
// still holds the bytes.
func TestMessagesNeverPrint(t *testing.T) {
	ctx := context.Background()
	// No 4-byte run of it occurs in the text around it.
	plaintext := []byte("Qzv#7Kx!pW9wjQ~Yb2&Zr@Jq")
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			id := a.send(bob, string(plaintext))
			res := b.pollKeep()
			require.Len(t, res, 1)
			m, ok := res[0].(*client.Message)
			require.True(t, ok, "%T", res[0])
			require.Equal(t, plaintext, m.Plaintext, "the field is the one way to the bytes")
			want := "client.Message{From: alice/1, ID: " + id.String() + ", Sequence: " + strconv.FormatInt(m.Sequence, 10) +
				", Plaintext: redacted (24 bytes), Again: false, FirstContact: true}"
			require.Equal(t, want, leakcheck.Everywhere(t, m, plaintext))
			require.Equal(t, want, leakcheck.Everywhere(t, *m, plaintext))
			for _, verb := range leakcheck.Verbs {
				leakcheck.RequireNoLeak(t, fmt.Sprintf(verb, res), plaintext)
			}

			out, err := a.c.PendingMessages(ctx, store.PageRequest{Limit: 10})
			require.NoError(t, err)
			require.Len(t, out.Messages, 1)
			require.Contains(t, leakcheck.Everywhere(t, out, plaintext), "Plaintext: redacted (24 bytes)")
			in, err := b.c.PendingInbound(ctx, store.InboundPageRequest{Limit: 10})
			require.NoError(t, err)
			require.Len(t, in.Messages, 1)
			require.Contains(t, leakcheck.Everywhere(t, in, plaintext), "Plaintext: redacted (24 bytes)")
			for m, err := range a.c.AllPendingMessages(ctx, nil) {
				require.NoError(t, err)
				leakcheck.Everywhere(t, m, plaintext)
			}

			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("received", "m", m)
			var rec map[string]any
			require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
			require.Equal(t, map[string]any{"From": "alice/1", "ID": id.String(), "Sequence": float64(m.Sequence),
				"Plaintext": "redacted (24 bytes)", "Again": false, "FirstContact": true}, rec["m"])
		})
	}
}

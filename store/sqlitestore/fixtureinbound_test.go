package sqlitestore_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/internal/testkit/tabledump"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// fixtureInbound is the frozen version-14 fixture's pending inbound rows,
// as its expected.json gives them.
func fixtureInbound(t *testing.T) []store.InboundMessage {
	t.Helper()
	var exp struct {
		PendingInbound []struct {
			Sequence       int64  `json:"sequence"`
			SenderUserID   string `json:"sender_user_id"`
			SenderDeviceID int64  `json:"sender_device_id"`
			LogicalID      string `json:"logical_id"`
			Plaintext      string `json:"plaintext"`
		} `json:"pending_inbound"`
	}
	raw, err := os.ReadFile("../../fixtures/version14/expected.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &exp))
	var out []store.InboundMessage
	for _, r := range exp.PendingInbound {
		b, err := hex.DecodeString(r.LogicalID)
		require.NoError(t, err)
		id, err := store.ParseLogicalMessageID(b)
		require.NoError(t, err)
		out = append(out, store.InboundMessage{Sequence: r.Sequence, Sender: store.DeviceAddress{UserID: r.SenderUserID, DeviceID: r.SenderDeviceID}, ID: id, Plaintext: []byte(r.Plaintext)})
	}
	require.NotEmpty(t, out, "the fixture holds pending inbound rows")
	return out
}

// TestFixtureInboundReadableAndFinalizable: the pending inbound rows of
// a version-14 file (the frozen fixture, upgraded by Open; and the same
// rows in a file of the legacy plaintext layout, upgraded with
// WithLegacyUpgrade) are paged, counted and walked with their plaintext,
// and removed one by one. A removed row's id is recorded as processed
// (version 14 recorded it only when the message was finalized), so that
// the sender's retry is a duplicate; nothing else in the file changes.
func TestFixtureInboundReadableAndFinalizable(t *testing.T) {
	ctx := context.Background()
	want := fixtureInbound(t)
	for _, tt := range []struct {
		name string
		load func(t *testing.T, path string)
		opts []sqlitestore.Option
	}{
		{"version 14", func(t *testing.T, path string) {
			require.NoError(t, fixturekit.Load(ctx, path, version14.FixtureSQL()))
		}, nil},
		{"legacy plaintext layout", func(t *testing.T, path string) {
			legacy, err := os.ReadFile("../../fixtures/legacy/fixture.sql")
			require.NoError(t, err)
			// The version-14 fixture's pending inbound rows, sealed with
			// the same fixture key, bound to their sender and id.
			var rows []string
			for line := range strings.Lines(string(version14.FixtureSQL())) {
				if strings.HasPrefix(line, "INSERT INTO pending_inbound_message ") {
					rows = append(rows, line)
				}
			}
			require.Len(t, rows, len(want))
			require.NoError(t, fixturekit.Load(ctx, path, append(legacy, []byte(strings.Join(rows, ""))...)))
		}, []sqlitestore.Option{sqlitestore.WithLegacyUpgrade()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := dbPath(t)
			tt.load(t, path)
			keys, err := seal.NewKeyring(fixturekit.Key())
			require.NoError(t, err)
			s, err := sqlitestore.Open(ctx, path, keys, tt.opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })

			n, err := s.PendingInboundCount(ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, len(want), n)
			page, err := s.PendingInbound(ctx, store.InboundPageRequest{Limit: store.MaxPageSize})
			require.NoError(t, err)
			require.Empty(t, page.Unreadable)
			require.Equal(t, want, page.Messages)
			one, err := s.PendingInbound(ctx, store.InboundPageRequest{Limit: 1, Sender: &want[1].Sender})
			require.NoError(t, err)
			require.Equal(t, want[1:2], one.Messages)

			raw := sqliteaccess.DB(s)
			before := tabledump.Tables(t, raw)
			processedBefore := tabledump.Rows(t, raw, "processed_inbound_message")
			removed, ok, err := s.RemovePendingInbound(ctx, want[0].Sequence)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, store.RemovedInbound{Sender: want[0].Sender, ID: want[0].ID, Decoded: true}, removed)
			var processed int
			require.NoError(t, raw.QueryRowContext(ctx,
				"SELECT count(*) FROM processed_inbound_message WHERE sender_user_id = ? AND sender_device_id = ? AND logical_id = ?",
				want[0].Sender.UserID, want[0].Sender.DeviceID, want[0].ID[:]).Scan(&processed))
			require.Equal(t, 1, processed, "the finalized message is processed: a retry is a duplicate")
			require.Len(t, tabledump.Rows(t, raw, "processed_inbound_message"), len(processedBefore)+1)

			after := tabledump.Tables(t, raw)
			for table := range before {
				if table != "pending_inbound_message" && table != "processed_inbound_message" {
					require.Equal(t, before[table], after[table], "table %s changed", table)
				}
			}
			page, err = s.PendingInbound(ctx, store.InboundPageRequest{Limit: store.MaxPageSize})
			require.NoError(t, err)
			require.Equal(t, want[1:], page.Messages, "the other rows stay, readable")

			_, ok, err = s.RemovePendingInbound(ctx, want[0].Sequence)
			require.NoError(t, err)
			require.False(t, ok, "removing twice finds nothing")
			for _, m := range want[1:] {
				_, ok, err := s.RemovePendingInbound(ctx, m.Sequence)
				require.NoError(t, err)
				require.True(t, ok)
			}
			n, err = s.PendingInboundCount(ctx, nil)
			require.NoError(t, err)
			require.Zero(t, n)
		})
	}
}

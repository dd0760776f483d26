package store_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/leakcheck"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// secret returns 32 bytes derived from s.
func secret(s string) []byte { b := sha256.Sum256([]byte(s)); return b[:] }

// The values holding a sealed record's plaintext about keys and sessions
// print redacted under every fmt verb, alone and inside the values that
// carry them (Inbound, PeerUpdate, PeerReading); slog logs them redacted;
// encoding/json and gob refuse them. The redacted text tells nil from
// empty (unchanged from deleted in an update) and gives each length.
func TestSecretsNeverPrint(t *testing.T) {
	local := store.LocalIdentity{Address: store.DeviceAddress{UserID: "alice", DeviceID: 1}, Secret: secret("identity")}
	peer := store.PeerState{Session: secret("session"), Initiation: secret("initiation"), Pin: secret("pin")}
	secrets := [][]byte{local.Secret, peer.Session, peer.Initiation, peer.Pin}
	for _, tc := range []struct {
		name string
		v    any
		says string
	}{
		{"local identity", local, "store.LocalIdentity{Address: alice/1, Secret: redacted (32 bytes)}"},
		{"pointer to local identity", &local, "store.LocalIdentity{Address: alice/1, Secret: redacted (32 bytes)}"},
		{"peer state", peer, "store.PeerState{Session: redacted (32 bytes), Initiation: redacted (32 bytes), Pin: redacted (32 bytes)}"},
		{"peer state update", store.PeerState{Session: peer.Session, Initiation: []byte{}}, "store.PeerState{Session: redacted (32 bytes), Initiation: empty, Pin: nil}"},
		{"inbound", store.Inbound{Update: peer, Local: &local}, "Secret: redacted (32 bytes)"},
		{"peer update", store.PeerUpdate{Peer: local.Address, Update: peer}, "Pin: redacted (32 bytes)"},
		{"peer reading", store.PeerReading{Sealed: peer, Opened: peer}, "Session: redacted (32 bytes)"},
		{"slice", []store.PeerState{peer}, "Initiation: redacted (32 bytes)"},
		{"map", map[string]*store.LocalIdentity{"me": &local}, "Secret: redacted (32 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := leakcheck.Everywhere(t, tc.v, secrets...)
			require.Contains(t, out, tc.says)
		})
	}
	require.Equal(t, fmt.Sprintf("%q", local.String()), fmt.Sprintf("%q", local))
	require.Equal(t, secret("identity"), local.Secret, "the field is the one way to the bytes")
}

// The values holding a message's plaintext (PendingMessage,
// InboundMessage, their unreadable twins, pages and errors, and an
// application's values holding them) print redacted under every fmt
// verb, log redacted with both slog handlers, and encoding/json and gob
// refuse them. The redacted text names the message (sequence, address,
// logical id) and the plaintext's length; the Plaintext field still
// holds the bytes.
func TestMessagesNeverPrint(t *testing.T) {
	// No 4-byte run of either occurs in the text around them (the hex of
	// an error's text shows under %x).
	plaintext := []byte("Qzv#7Kx!pW9wjQ~Yb2&Zr@Jq")
	leftover := secret("an unreadable row's plaintext, set by the application")
	id := store.LogicalMessageID{0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18, 0x29, 0x3a, 0x4b, 0x5c, 0x6d, 0x7e, 0x8f, 0x90}
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 2}
	next := int64(8)
	out := store.PendingMessage{Sequence: 7, Recipient: bob, ID: id, Plaintext: plaintext}
	badOut := store.UnreadablePendingMessage{
		PendingMessage: store.PendingMessage{Sequence: 8, Recipient: bob, ID: id, Plaintext: leftover},
		Cause:          fmt.Errorf("open: %w", seal.ErrAuthentication),
	}
	in := store.InboundMessage{Sequence: 3, Sender: bob, ID: id, Plaintext: plaintext}
	badIn := store.UnreadableInboundMessage{InboundMessage: store.InboundMessage{Sequence: 4, Sender: bob, ID: id}, Cause: seal.ErrWrongKey}
	type held struct {
		Messages map[string][]*store.InboundMessage
		Last     *store.PendingMessage
	}
	secrets := [][]byte{plaintext, leftover}
	outText := "store.PendingMessage{Sequence: 7, Recipient: bob/2, ID: " + id.String() + ", Plaintext: redacted (24 bytes)}"
	inText := "store.InboundMessage{Sequence: 3, Sender: bob/2, ID: " + id.String() + ", Plaintext: redacted (24 bytes)}"
	for _, tc := range []struct {
		name string
		v    any
		says string
	}{
		{"pending message", out, outText},
		{"pointer to pending message", &out, outText},
		{"unreadable pending message", badOut, "store.UnreadablePendingMessage{PendingMessage: store.PendingMessage{Sequence: 8, Recipient: bob/2, ID: " +
			id.String() + ", Plaintext: redacted (32 bytes)}, Cause: open: " + seal.ErrAuthentication.Error() + "}"},
		{"pending page", store.PendingMessagePage{Messages: []store.PendingMessage{out}, Unreadable: []store.UnreadablePendingMessage{badOut}, NextAfterSequence: &next},
			"store.PendingMessagePage{Messages: [" + outText + "], Unreadable: [store.UnreadablePendingMessage{"},
		{"last pending page", &store.PendingMessagePage{Messages: []store.PendingMessage{out, out}}, "], Unreadable: [], NextAfterSequence: nil}"},
		{"inbound message", in, inText},
		{"pointer to inbound message", &in, inText},
		{"unreadable inbound message", badIn, "store.UnreadableInboundMessage{InboundMessage: store.InboundMessage{Sequence: 4, Sender: bob/2, ID: " +
			id.String() + ", Plaintext: nil}, Cause: " + seal.ErrWrongKey.Error() + "}"},
		{"inbound page", store.InboundPage{Messages: []store.InboundMessage{in}, Unreadable: []store.UnreadableInboundMessage{badIn}, NextAfterSequence: &next},
			"store.InboundPage{Messages: [" + inText + "], Unreadable: [store.UnreadableInboundMessage{"},
		{"slice", []store.PendingMessage{out, badOut.PendingMessage}, outText},
		{"map", map[int64]store.InboundMessage{3: in}, inText},
		{"an application's struct", held{Messages: map[string][]*store.InboundMessage{"bob": {&in}}, Last: &out}, outText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := leakcheck.Everywhere(t, tc.v, secrets...)
			require.Contains(t, got, tc.says)
		})
	}

	// The errors carrying unreadable rows keep naming them, and print and
	// encode nothing of a plaintext set on an entry.
	for _, tc := range []struct {
		name string
		err  error
		says string
	}{
		{"unreadable error", &store.UnreadableError{Entries: []store.UnreadablePendingMessage{badOut}},
			"1 skipped; sequence 8 (bob/2, " + id.String() + "): open: " + seal.ErrAuthentication.Error()},
		{"unreadable inbound error", &store.UnreadableInboundError{Entry: store.UnreadableInboundMessage{InboundMessage: in, Cause: seal.ErrWrongKey}},
			"inbound sequence 3 (bob/2, " + id.String() + "): " + seal.ErrWrongKey.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Everywhere(t, tc.err, secrets...)
			require.Contains(t, tc.err.Error(), tc.says)
			require.Equal(t, tc.err.Error(), fmt.Sprintf("%v", tc.err))
		})
	}

	require.Equal(t, plaintext, out.Plaintext, "the field is the one way to the bytes")
	require.Equal(t, fmt.Sprintf("%q", outText), fmt.Sprintf("%q", out))
	require.Equal(t, outText, out.GoString())
}

// Both slog handlers log a message as a group of what names it and the
// plaintext's length, an unreadable row with its cause, and a page as
// its counts and cursor.
func TestMessagesLogAsGroups(t *testing.T) {
	id := store.LogicalMessageID{1, 2, 3}
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 2}
	next := int64(9)
	out := store.PendingMessage{Sequence: 7, Recipient: bob, ID: id, Plaintext: []byte("hello")}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("sent", "m", out)
	log.Info("in", "m", store.InboundMessage{Sequence: 3, Sender: bob, ID: id, Plaintext: []byte{}})
	log.Info("bad", "m", store.UnreadablePendingMessage{PendingMessage: store.PendingMessage{Sequence: 8, Recipient: bob, ID: id}, Cause: seal.ErrWrongKey})
	log.Info("page", "p", store.PendingMessagePage{Messages: []store.PendingMessage{out}, NextAfterSequence: &next})
	log.Info("last", "p", store.InboundPage{})
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		for _, k := range []string{"m", "p"} {
			if v, ok := rec[k]; ok {
				got = append(got, v.(map[string]any))
			}
		}
	}
	require.Equal(t, []map[string]any{
		{"Sequence": float64(7), "Recipient": "bob/2", "ID": id.String(), "Plaintext": "redacted (5 bytes)"},
		{"Sequence": float64(3), "Sender": "bob/2", "ID": id.String(), "Plaintext": "empty"},
		{"Sequence": float64(8), "Recipient": "bob/2", "ID": id.String(), "Plaintext": "nil", "Cause": seal.ErrWrongKey.Error()},
		{"Messages": float64(1), "Unreadable": float64(0), "NextAfterSequence": float64(9)},
		{"Messages": float64(0), "Unreadable": float64(0)},
	}, got)

	buf.Reset()
	slog.New(slog.NewTextHandler(&buf, nil)).Info("sent", "m", out)
	require.Contains(t, buf.String(), "m.Sequence=7 m.Recipient=bob/2 m.ID="+id.String()+` m.Plaintext="redacted (5 bytes)"`)
}

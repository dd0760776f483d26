package frozen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// ExpectedFile is the older record of what a fixture holds in clear,
// written by the generator of the version-14 fixture before Freeze wrote
// ContentsFile: the plaintext of every sealed value with the ids,
// sequences and high-water marks. Prove reads it when a fixture has no
// ContentsFile.
const ExpectedFile = "expected.json"

// expected is the content of an ExpectedFile.
type expected struct {
	KeyID                 seal.KeyID `json:"key_id"`
	LocalIdentityUserID   string     `json:"local_identity_user_id"`
	LocalIdentityDeviceID int64      `json:"local_identity_device_id"`
	LocalIdentitySecret   string     `json:"local_identity_secret"`
	Peers                 []struct {
		UserID     string `json:"user_id"`
		DeviceID   int64  `json:"device_id"`
		Pin        string `json:"pin"`
		Session    string `json:"session"`
		Initiation string `json:"initiation"`
	} `json:"peers"`
	PendingOutbound []struct {
		Sequence          int64  `json:"sequence"`
		RecipientUserID   string `json:"recipient_user_id"`
		RecipientDeviceID int64  `json:"recipient_device_id"`
		LogicalID         string `json:"logical_id"`
		Plaintext         string `json:"plaintext"`
	} `json:"pending_outbound"`
	PendingOutboundHighWater int64 `json:"pending_outbound_high_water"`
	PendingInbound           []struct {
		Sequence       int64  `json:"sequence"`
		SenderUserID   string `json:"sender_user_id"`
		SenderDeviceID int64  `json:"sender_device_id"`
		LogicalID      string `json:"logical_id"`
		Plaintext      string `json:"plaintext"`
	} `json:"pending_inbound"`
	PendingInboundHighWater int64 `json:"pending_inbound_high_water"`
	ProcessedInbound        []struct {
		SenderUserID   string `json:"sender_user_id"`
		SenderDeviceID int64  `json:"sender_device_id"`
		LogicalID      string `json:"logical_id"`
		ProcessedAt    int64  `json:"processed_at"`
	} `json:"processed_inbound"`
}

// parseExpected parses fsys's ExpectedFile, refusing unknown fields.
func parseExpected(fsys fs.FS) (*expected, error) {
	var e expected
	if err := readJSON(fsys, ExpectedFile, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// readJSON parses fsys's file name into v, refusing unknown fields: a
// record that says more than the proof checks is an error, not ignored.
func readJSON(fsys fs.FS, name string, v any) error {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// checkExpectedComplete checks that the loaded fixture has rows in every
// table but the history's, as many pending outbound rows as exp lists
// and a pending_outbound_message high-water mark above max(sequence) (the
// highest row was deleted).
func checkExpectedComplete(before *Database, exp *expected) error {
	for _, t := range before.Tables {
		if t != "schema_revision" && len(before.Rows[t]) == 0 {
			return fmt.Errorf("table %s is empty", t)
		}
	}
	if n := len(before.Rows["pending_outbound_message"]); n != len(exp.PendingOutbound) {
		return fmt.Errorf("pending_outbound_message holds %d rows, %s %d", n, ExpectedFile, len(exp.PendingOutbound))
	}
	if len(exp.PendingOutbound) == 0 {
		return fmt.Errorf("%s lists no pending outbound message", ExpectedFile)
	}
	maxSeq := exp.PendingOutbound[len(exp.PendingOutbound)-1].Sequence
	if hw := before.Sequence["pending_outbound_message"]; hw != exp.PendingOutboundHighWater || hw <= maxSeq {
		return fmt.Errorf("pending_outbound_message high-water mark %d, want %d above max(sequence) %d", hw, exp.PendingOutboundHighWater, maxSeq)
	}
	return nil
}

// checkPendingOpen opens the database at path with the store and a
// keyring of the fixture key, pages through every pending message in pages
// of 5 and checks that the count, the cursor order, the sequences,
// recipients, logical ids and plaintexts are exactly those of exp.
func checkPendingOpen(ctx context.Context, m *migration.Migrator, path string, exp *expected) error {
	s, err := openStore(ctx, m, path)
	if err != nil {
		return err
	}
	defer s.Close()
	var got []store.PendingMessage
	req := store.PageRequest{Limit: 5}
	for pages := 0; ; pages++ {
		if pages > len(exp.PendingOutbound) {
			return errors.New("pagination does not end")
		}
		p, err := s.PendingMessages(ctx, req)
		if err != nil {
			return err
		}
		if len(p.Unreadable) > 0 {
			return &store.UnreadableError{Entries: p.Unreadable}
		}
		got = append(got, p.Messages...)
		if p.NextAfterSequence == nil {
			break
		}
		req.After = p.NextAfterSequence
	}
	if len(got) != len(exp.PendingOutbound) {
		return fmt.Errorf("%d pending messages paged, want %d", len(got), len(exp.PendingOutbound))
	}
	n, err := s.PendingMessageCount(ctx, nil)
	if err != nil {
		return err
	}
	if n != int64(len(exp.PendingOutbound)) {
		return fmt.Errorf("count %d, want %d", n, len(exp.PendingOutbound))
	}
	perRecipient := map[store.DeviceAddress]int64{}
	for i, e := range exp.PendingOutbound {
		g := got[i]
		to := store.DeviceAddress{UserID: e.RecipientUserID, DeviceID: e.RecipientDeviceID}
		perRecipient[to]++
		switch {
		case g.Sequence != e.Sequence:
			return fmt.Errorf("message %d: sequence %d, want %d", i, g.Sequence, e.Sequence)
		case g.Recipient != to:
			return fmt.Errorf("sequence %d: recipient %s, want %s", e.Sequence, g.Recipient, to)
		case g.ID.String() != e.LogicalID:
			return fmt.Errorf("sequence %d: logical id %s, want %s", e.Sequence, g.ID, e.LogicalID)
		case string(g.Plaintext) != e.Plaintext:
			return fmt.Errorf("sequence %d: plaintext %q, want %q", e.Sequence, g.Plaintext, e.Plaintext)
		}
	}
	for to, want := range perRecipient {
		n, err := s.PendingMessageCount(ctx, &to)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("count for %s: %d, want %d", to, n, want)
		}
	}
	return nil
}

// checkStateOpens checks that every other sealed value (local identity,
// identity pins, sessions, session initiations, pending inbound messages)
// opens with the fixture key to its plaintext in exp.
func checkStateOpens(ctx context.Context, m *migration.Migrator, path string, exp *expected) error {
	s, err := openStore(ctx, m, path)
	if err != nil {
		return err
	}
	defer s.Close()
	li, err := s.LocalIdentity(ctx)
	if err != nil {
		return err
	}
	if li.Address != (store.DeviceAddress{UserID: exp.LocalIdentityUserID, DeviceID: exp.LocalIdentityDeviceID}) || string(li.Secret) != exp.LocalIdentitySecret {
		return fmt.Errorf("local identity %s %q differs", li.Address, li.Secret)
	}
	for _, e := range exp.Peers {
		p := store.DeviceAddress{UserID: e.UserID, DeviceID: e.DeviceID}
		st, err := s.Peer(ctx, p)
		if err != nil {
			return err
		}
		if string(st.Pin) != e.Pin || string(st.Session) != e.Session || string(st.Initiation) != e.Initiation {
			return fmt.Errorf("peer %s: state differs", p)
		}
	}
	rows, err := db.New(sqliteaccess.DB(s)).SealedPendingInboundBatch(ctx, db.SealedPendingInboundBatchParams{RowLimit: int64(len(exp.PendingInbound)) + 1})
	if err != nil {
		return err
	}
	if len(rows) != len(exp.PendingInbound) {
		return fmt.Errorf("%d pending inbound rows, want %d", len(rows), len(exp.PendingInbound))
	}
	for i, e := range exp.PendingInbound {
		r := rows[i]
		from := store.DeviceAddress{UserID: r.SenderUserID, DeviceID: r.SenderDeviceID}
		id, err := store.ParseLogicalMessageID(r.LogicalID)
		if err != nil {
			return err
		}
		pt, err := sqliteaccess.Keyring(s).Open(seal.RecordPendingInbound, seal.MessageAD(from.UserID, from.DeviceID, id), r.Sealed)
		if err != nil {
			return fmt.Errorf("pending inbound %d: %w", r.Sequence, err)
		}
		if r.Sequence != e.Sequence || string(pt) != e.Plaintext {
			return fmt.Errorf("pending inbound %d: %q, want %d %q", r.Sequence, pt, e.Sequence, e.Plaintext)
		}
	}
	return nil
}

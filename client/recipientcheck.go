package client

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/store"
)

// foreignRow reports whether m, read from the store for recipient want,
// is stored for another recipient, and if so returns it as unreadable
// (its plaintext dropped). The store selects a recipient's rows with SQL
// comparisons, which a writer of the database file can make match a
// lookalike (a recipient column re-declared COLLATE NOCASE returns Bob's
// rows for bob); the client uses a row only if its recipient is want byte
// for byte, so it never sends one recipient's message to another, nor
// lists it as theirs.
func foreignRow(m store.PendingMessage, want ids.DeviceAddress) (store.UnreadablePendingMessage, bool) {
	if m.Recipient == want {
		return store.UnreadablePendingMessage{}, false
	}
	m.Plaintext = nil
	return store.UnreadablePendingMessage{
		PendingMessage: m,
		Cause: fmt.Errorf("%w: stored for recipient %q device %d, read for recipient %q device %d",
			store.ErrCorruptRow, m.Recipient.UserID, m.Recipient.DeviceID, want.UserID, want.DeviceID),
	}, true
}

// checkPage moves each message of page that is stored for another
// recipient than want (see foreignRow) to its unreadable rows, which stay
// in ascending sequence order.
func checkPage(page store.PendingMessagePage, want ids.DeviceAddress) store.PendingMessagePage {
	kept := page.Messages[:0:0]
	moved := false
	for _, m := range page.Messages {
		if u, foreign := foreignRow(m, want); foreign {
			page.Unreadable = append(page.Unreadable, u)
			moved = true
			continue
		}
		kept = append(kept, m)
	}
	if !moved {
		return page
	}
	page.Messages = kept
	slices.SortFunc(page.Unreadable, func(a, b store.UnreadablePendingMessage) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return page
}

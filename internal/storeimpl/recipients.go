package storeimpl

import (
	"math"

	"github.com/securemsg/storage/store"
)

// RecipientsFrom returns the position a recipients' page of r starts
// after: the cursor, or for a page from the start an address below every
// one the schema admits (the empty user id and the smallest device id).
func RecipientsFrom(r store.RecipientPageRequest) store.DeviceAddress {
	if r.After == nil {
		return store.DeviceAddress{UserID: "", DeviceID: math.MinInt64}
	}
	return *r.After
}

// RecipientPage builds the page of the recipients a store read for a page
// of limit: rows in ascending address order, at most limit + 1 of them
// (the last one only says that another page follows). NextAfterRecipient
// is the last returned address if more follow.
func RecipientPage(rows []store.PendingRecipient, limit int) store.PendingRecipientPage {
	if len(rows) <= limit {
		return store.PendingRecipientPage{Recipients: rows}
	}
	rows = rows[:limit]
	next := rows[limit-1].Recipient
	return store.PendingRecipientPage{Recipients: rows, NextAfterRecipient: &next}
}

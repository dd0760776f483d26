package rowseal

import "github.com/securemsg/storage/store"

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

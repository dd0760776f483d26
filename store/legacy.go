package store

import "fmt"

// LegacyPhase is the step of a legacy plaintext migration (see
// sqlitestore.WithLegacyUpgrade) a LegacyProgress report belongs to.
type LegacyPhase int

const (
	// LegacySeal: batches of legacy rows are being sealed.
	LegacySeal LegacyPhase = iota + 1
	// LegacyErase: every row is sealed; the file and its WAL are being
	// rewritten without the legacy plaintext (VACUUM, checkpoint).
	LegacyErase
	// LegacySetAside: the legacy table was set aside, its malformed rows
	// erased; nothing is sealed yet.
	LegacySetAside
)

// String returns "seal", "erase" or "set-aside".
func (p LegacyPhase) String() string {
	switch p {
	case LegacySeal:
		return "seal"
	case LegacyErase:
		return "erase"
	case LegacySetAside:
		return "set-aside"
	}
	return fmt.Sprintf("LegacyPhase(%d)", int(p))
}

// LegacyProgress reports how far a legacy plaintext migration has come.
// Open sends one when it has set the legacy table aside (LegacySetAside,
// only in the run that does it), one after every committed batch
// (LegacySeal) and one when the erase step starts (LegacyErase).
type LegacyProgress struct {
	// Phase is the step under way.
	Phase LegacyPhase
	// Sealed is the number of legacy rows sealed so far, by this run and
	// by the interrupted runs before it.
	Sealed int64
	// Total is the number of legacy rows of the whole migration (sealed
	// before this run plus left to seal when it started), erased rows not
	// included.
	Total int64
	// Erased lists the malformed rows erased instead of sealed, in
	// sequence order; set in the LegacySetAside report only.
	Erased []ErasedLegacyRow
}

// ErasedLegacyRow is a legacy row that could not be sealed as a pending
// message and was erased when the legacy table was set aside: its
// plaintext is deleted with it, and the erase step removes it from the
// file.
type ErasedLegacyRow struct {
	// Sequence is the row's sequence.
	Sequence int64
	// Reason wraps ErrCorruptRow (a column NULL or of the wrong storage
	// class, a plaintext longer than MaxPlaintextSize; with ErrDuplicate
	// too, the recipient and logical id of a row at a lower sequence,
	// which is sealed) or ErrInvalidArgument (a malformed recipient or logical
	// id).
	Reason error
}

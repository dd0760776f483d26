package legacy

// Exported for the external tests of this package, which also use
// sqlitestore (itself a user of this package).
var (
	DDL              = ddl
	StepCreateSealed = stepCreateSealed
	StepIndex        = stepIndex
)

// SetTestHookAfterRow sets the hook run after each copied row.
func SetTestHookAfterRow(f func(copied int)) { testHookAfterRow = f }

// SetReadChunk sets how many rows a batch reads at a time and returns the
// previous value.
func SetReadChunk(n int) int { old := readChunk; readChunk = n; return old }

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

package legacy

// Exported for the external tests of this package, which also use
// sqlitestore (itself a user of this package).
var (
	DDL              = ddl
	StepCreateSealed = stepCreateSealed
	StepIndex        = stepIndex
)

// WithAfterRow returns o with f run after each copied row, given the rows
// copied so far by the call: a per-call hook, so tests can run in
// parallel.
func WithAfterRow(o Options, f func(copied int)) Options {
	o.afterRow = f
	return o
}

// WithAfterRead returns o with f run after each read of legacy rows, given
// how many it read.
func WithAfterRead(o Options, f func(rows int)) Options {
	o.afterRead = f
	return o
}

package pipeline

import "errors"

// ErrChanged means no stable snapshot of the database could be read
// (ReadStable): on every attempt a writer held the database exclusively,
// was opening or closing it, or changed the file under a read that
// could not see it. Nothing read was used; reading again later, when the
// writer is idle, can succeed.
var ErrChanged = errors.New("pipeline: no stable snapshot of the database could be read")

// ErrNeedsRecovery means the database file cannot be read without writing:
// a -wal lies beside it without its -shm (the files were copied, or the
// -shm removed), or a hot -journal holds an interrupted write that must be
// rolled back. A read-write open (migrate up, or the app) recovers it;
// ReadStable reports nothing from it and creates nothing.
var ErrNeedsRecovery = errors.New("pipeline: database needs recovery by a read-write open")

// errWALGone is snapshotConnector.Connect's error when the -wal it was to
// read through is gone.
var errWALGone = errors.New("pipeline: the -wal is gone")

// errQuietGone is snapshotConnector.Connect's error when a -wal or
// -journal came beside a database it opened immutable before its read
// transaction began.
var errQuietGone = errors.New("pipeline: a -wal or -journal came while it opened")

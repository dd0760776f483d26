// Package reliability holds the client's reliability tests: nothing lost,
// nothing leaked. It has only tests (no file an application could
// import):
//
//   - crash_test.go kills a worker process (internal/crashworker) with
//     SIGKILL at random moments while it sends, acknowledges, abandons,
//     retries and rotates the storage key, and checks after every kill,
//     with each database reopened by sqlitestore.Open first, that the
//     SQLite files are intact, every pending message is exactly where the
//     journal of returned calls says it is and every sealed value is under
//     the right key;
//   - crash_legacy_test.go kills the legacy plaintext migration that
//     sqlitestore.Open runs, and checks after every kill that the next
//     Open completes it and leaves no legacy plaintext in the database
//     file, its WAL or its shared-memory file;
//   - fault_test.go injects storage errors (failing statements, commits,
//     row reads, a full disk) through a wrapping database/sql driver and
//     checks that every operation rolls back completely;
//   - tamper_test.go alters sealed values in the database and checks that
//     each alteration gives its own seal sentinel through the store and
//     client API, never another row's plaintext;
//   - soak_test.go runs every operation concurrently across several
//     recipients and checks the queue's invariants afterwards.
package reliability

// Package dbcheck only holds checks of the sqlc-generated code in
// internal/db (and its subpackages) and of the SQL in queries/ it is
// generated from: no unexpanded sqlc macro or named parameter left in a
// generated statement, only generated files in internal/db, and no OFFSET
// anywhere. It has no non-test code and is imported by nothing.
package dbcheck

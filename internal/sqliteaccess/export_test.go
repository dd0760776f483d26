package sqliteaccess

// IntField reads the field name of st, a *sqlitestore.Store, as an int:
// for the tests of field's refusals.
func IntField(st any, name string) int { return field[int](st, name) }

package seal

// Sealer seals and opens records with a keyring's keys: what a store is
// given to seal its values with. *Keyring is the Sealer an application
// passes; a test or a tool may pass a type wrapping one (to count the
// records a store opens, say). Each method is the Keyring method of that
// name.
type Sealer interface {
	// Seal seals plaintext as a record of type rt bound to ad, with the
	// current key (Keyring.Seal).
	Seal(rt RecordType, ad, plaintext []byte) ([]byte, error)
	// Open checks and opens a record of type rt bound to ad
	// (Keyring.Open).
	Open(rt RecordType, ad, sealed []byte) ([]byte, error)
	// Current returns the id of the key that seals (Keyring.Current).
	Current() KeyID
	// KeyIDs returns the ids of every key held, in ascending order
	// (Keyring.KeyIDs).
	KeyIDs() []KeyID
}

// RotatingSealer is a Sealer whose keys a key rotation changes
// (store/sqlitestore's RotateKey): it adds the new key, which becomes the
// sealing key, and forgets the old ones once every record is re-sealed.
// *Keyring is one.
type RotatingSealer interface {
	Sealer
	// Add makes k the sealing key, keeping the previous keys for opening
	// (Keyring.Add).
	Add(k Key) error
	// CheckAdd returns the error Add would return for k, changing
	// nothing (Keyring.CheckAdd).
	CheckAdd(k Key) error
	// Forget drops the key with id (Keyring.Forget).
	Forget(id KeyID) error
}

var _ RotatingSealer = (*Keyring)(nil)

package session

import (
	"encoding/binary"
	"fmt"

	"github.com/securemsg/storage/store"
)

// writer appends big-endian fields to a byte slice.
type writer struct{ b []byte }

func (w *writer) u8(v byte)      { w.b = append(w.b, v) }
func (w *writer) u16(v uint16)   { w.b = binary.BigEndian.AppendUint16(w.b, v) }
func (w *writer) u32(v uint32)   { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *writer) u64(v uint64)   { w.b = binary.BigEndian.AppendUint64(w.b, v) }
func (w *writer) raw(p []byte)   { w.b = append(w.b, p...) }
func (w *writer) key(k [32]byte) { w.b = append(w.b, k[:]...) }

// address writes a device address as u16 user id length, user id, u64
// device id. The address must have been validated by the caller.
func (w *writer) address(a store.DeviceAddress) {
	w.u16(uint16(len(a.UserID)))
	w.raw([]byte(a.UserID))
	w.u64(uint64(a.DeviceID))
}

// identity writes a public identity as its two 32-byte keys.
func (w *writer) identity(p PublicIdentity) {
	w.key(p.SigningKey)
	w.key(p.DHKey)
}

// reader consumes big-endian fields from a byte slice. The first failure is
// sticky: later reads return zero values and err keeps the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errShort
		r.b = nil
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() byte {
	p := r.take(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (r *reader) u16() uint16 {
	p := r.take(2)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint16(p)
}

func (r *reader) u32() uint32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

func (r *reader) u64() uint64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

func (r *reader) key() (k [32]byte) {
	copy(k[:], r.take(32))
	return k
}

// bool reads a byte that must be 0 or 1.
func (r *reader) bool() bool {
	v := r.u8()
	if r.err == nil && v > 1 {
		r.err = fmt.Errorf("boolean byte %d", v)
	}
	return v == 1
}

func (r *reader) identity() PublicIdentity {
	var p PublicIdentity
	p.SigningKey = r.key()
	p.DHKey = r.key()
	return p
}

// address reads and validates a device address written by writer.address.
func (r *reader) address() store.DeviceAddress {
	n := int(r.u16())
	if r.err == nil && n > store.MaxUserIDLen {
		r.err = fmt.Errorf("%w: user id of %d bytes, at most %d", store.ErrInvalidArgument, n, store.MaxUserIDLen)
	}
	user := r.take(n)
	dev := r.u64()
	if r.err != nil {
		return store.DeviceAddress{}
	}
	a := store.DeviceAddress{UserID: string(user), DeviceID: int64(dev)}
	if err := a.Validate(); err != nil {
		r.err = err
		return store.DeviceAddress{}
	}
	return a
}

// fail records err unless an earlier error is already recorded.
func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// finish returns the first error, or errTrailing if input is left over.
func (r *reader) finish() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d bytes", errTrailing, len(r.b))
	}
	return nil
}

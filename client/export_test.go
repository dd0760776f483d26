package client

// FailNextEncryptions makes the next n encryptions of c fail, as a broken
// cipher would, so tests can drive "a retry whose encryption failed". It
// exists only in this package's tests.
func (c *Client) FailNextEncryptions(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failEncrypt = n
}

// MaxBody is the largest plaintext Send accepts.
const MaxBody = maxBody

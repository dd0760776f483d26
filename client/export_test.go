package client

// MaxBody is the largest plaintext Send accepts.
const MaxBody = maxBody

package pipeline

// ReadAttempts is how often ReadStable tries before ErrChanged.
const ReadAttempts = readAttempts

package queues

// Spare returns how many spare segments q keeps, for tests.
func Spare[T, C any](q *Queue[T, C]) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nfree
}

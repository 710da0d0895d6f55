package ui

// SetObservationReadPage sets how many rows one store call of the
// observations page reads, for the tests of its paging, and returns the
// function that restores it.
func SetObservationReadPage(n int) (restore func()) {
	old := observationReadPage
	observationReadPage = n
	return func() { observationReadPage = old }
}

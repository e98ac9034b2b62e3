package postgres

// WaitBlocking is waitBlocking, for the tests of package postgres_test.
var WaitBlocking = waitBlocking

// SetCopyThreshold sets the smallest Insert that goes through COPY, for every view of s.
func SetCopyThreshold(s *Store, n int) { s.copyThreshold = n }

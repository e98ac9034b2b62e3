package postgres

// WaitBlocking is waitBlocking, for the tests of package postgres_test.
var WaitBlocking = waitBlocking

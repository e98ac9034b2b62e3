package mysql

import "time"

// Applied reports how many migrations the New behind s applied.
func Applied(s *Store) int { return s.applied }

// SetHoldGrace shortens HoldGrace for one store, for tests.
func SetHoldGrace(s *Store, d time.Duration) { s.grace = d }

// Statements splits a migration file as migrate does.
var Statements = statements

// CheckVersion is checkVersion.
var CheckVersion = checkVersion

//go:build race

package silo_test

// raceOn: built with the race detector, under which a sync.Pool drops a
// quarter of what it is given at random.
const raceOn = true

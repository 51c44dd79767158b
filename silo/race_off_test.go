//go:build !race

package silo_test

// raceOn: built with the race detector (race_on_test.go).
const raceOn = false

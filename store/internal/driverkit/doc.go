// Package driverkit holds what the drivers of this module share to meet the store
// contract: the checks of each method's arguments (the contract's ErrInvalid), the
// order in which batches touch rows, the overlap rule of a claim, the fence's
// arithmetic, the reference a task query agrees with, and the task an insert
// returns without reading it back. Sharing them makes every driver refuse the same
// input and answer in the same words; a driver outside this module writes its own.
package driverkit

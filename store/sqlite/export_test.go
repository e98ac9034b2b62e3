package sqlite

import "context"

// MigrateTo creates or migrates the file at path up to schema version v only, as an
// older ax would have left it.
func MigrateTo(path string, v int) error {
	w, err := openWriter(path)
	if err != nil {
		return err
	}
	defer w.Close()
	return (&Store{conns: &conns{w: w}}).migrate(context.Background(), v)
}

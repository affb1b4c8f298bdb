package main

import (
	"errors"
	"os/exec"
	"path/filepath"
)

func isNotFound(err error) bool {
	var ee *exec.Error
	return errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrNotFound)
}

func filepathJoin(elem ...string) string { return filepath.Join(elem...) }

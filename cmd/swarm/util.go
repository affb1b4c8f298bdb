package main

import (
	"errors"
	"os/exec"
)

func isNotFound(err error) bool {
	var ee *exec.Error
	return errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrNotFound)
}

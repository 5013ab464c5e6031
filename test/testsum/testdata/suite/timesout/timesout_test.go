// Package timesout has a test that outlives the suite's -timeout.
package timesout

import (
	"testing"
	"time"
)

func TestQuick(t *testing.T) {}

func TestHangs(t *testing.T) {
	t.Run("forever", func(t *testing.T) { time.Sleep(time.Hour) })
}

//go:build tools

// Package tools pins the NATS commands built by hack/build-tools.sh.
package tools

import (
	_ "github.com/nats-io/nats-server/v2"
	_ "github.com/nats-io/natscli/nats"
)

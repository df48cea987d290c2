package main

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestResettableDialerResetsInsteadOfClosing(t *testing.T) {
	tests := []struct {
		name    string
		reset   bool
		wantErr error
	}{
		{"close: the peer reads EOF after what was sent", false, io.EOF},
		{"reset: the peer's read fails with a reset", true, syscall.ECONNRESET},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := l.Accept()
				if err == nil {
					accepted <- c
				}
			}()
			d := &resettableDialer{d: net.Dialer{Timeout: time.Second}}
			c, err := d.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			peer := <-accepted
			defer peer.Close()
			if tt.reset {
				d.reset()
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = peer.Read(make([]byte, 1))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("peer read: got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

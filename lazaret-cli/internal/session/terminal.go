package session

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// IsTerminal reports whether fd is a terminal.
func IsTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// Terminal is a terminal put into raw mode. Restore puts back the mode it
// had; it is idempotent and safe to call from any goroutine, so every exit
// path (return, panic, signal) can call it.
type Terminal struct {
	fd    int
	saved unix.Termios

	once sync.Once
	err  error
}

// MakeRaw saves fd's terminal mode and switches it to raw mode: no echo,
// no line editing, no signal characters (^C reaches the sandbox's terminal
// as a byte, where its line discipline turns it into SIGINT), no input or
// output translation, 8-bit characters, reads return after one byte.
func MakeRaw(fd int) (*Terminal, error) {
	saved, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("reading the terminal mode: %w", err)
	}
	raw := rawMode(*saved)
	if err := setTermios(fd, &raw); err != nil {
		return nil, fmt.Errorf("setting raw terminal mode: %w", err)
	}
	return &Terminal{fd: fd, saved: *saved}, nil
}

// rawMode is the raw variant of t (the settings of cfmakeraw(3)).
func rawMode(t unix.Termios) unix.Termios {
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	return t
}

func setTermios(fd int, t *unix.Termios) error {
	return sys.IoctlSetTermios(fd, unix.TCSETS, t)
}

// Restore puts the saved mode back.
func (t *Terminal) Restore() error {
	t.once.Do(func() {
		if err := setTermios(t.fd, &t.saved); err != nil {
			t.err = fmt.Errorf("restoring the terminal mode: %w", err)
		}
	})
	return t.err
}

// Size returns fd's window size.
func Size(fd int) (rows, cols, xpixel, ypixel uint16, err error) {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("reading the terminal size: %w", err)
	}
	return ws.Row, ws.Col, ws.Xpixel, ws.Ypixel, nil
}

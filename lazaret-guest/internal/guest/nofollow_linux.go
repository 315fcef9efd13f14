package guest

import "syscall"

// syscallNoFollow refuses a credential bundle path whose last component is
// a symbolic link.
const syscallNoFollow = syscall.O_NOFOLLOW

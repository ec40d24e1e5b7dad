package offheap

import "golang.org/x/sys/unix"

// mapPopulate prefaults a mapping in one go: the weights are read right
// after mapping, and one populate costs far less than a fault per page.
const mapPopulate = unix.MAP_POPULATE

// Linked into the certfleet executable only. Debian's libmongoc initializes itself when it is
// loaded (on every start, the SQLite store included) and creates /dev/shm/mongoc-<pid> for its
// counters, removing it at a normal exit. A SIGKILLed process leaves its file behind; a later
// process given the same pid then fails the exclusive create and the driver prints "Falling back
// to malloc for counters" on stderr, before main and before our log handler exists, which breaks
// the JSON a CLI command prints. A file named after our own pid cannot belong to a live process
// (in this pid namespace), so it is removed here, in a .preinit_array entry: that runs before
// any shared library's constructor. (Setting MONGOC_DISABLE_SHM here would not help: libc's own
// initializer, which runs after this, resets the environment to the one the kernel passed.)
#include <unistd.h>

namespace {
void remove_stale_driver_counters(int, char**, char**) {
  // Only system calls here: libc is not initialized yet.
  char path[32] = "/dev/shm/mongoc-";
  char digits[16];
  int n = 0;
  for (auto pid = static_cast<unsigned>(::getpid()); n == 0 || pid != 0; pid /= 10) digits[n++] = char('0' + pid % 10);
  int at = 16;
  while (n > 0) path[at++] = digits[--n];
  path[at] = '\0';
  ::unlink(path);
}
}  // namespace

__attribute__((section(".preinit_array"), used)) static void (*const certfleet_preinit)(int, char**, char**) =
    remove_stale_driver_counters;

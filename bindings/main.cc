// vtrun: the executable. Everything happens in bindings/host.cc.
#include "bindings/host.h"

int main(int argc, char** argv) { return vt::lua::HostMain(argc, argv); }

#if defined(__SANITIZE_ADDRESS__)
// The sanitizer build (VT_SANITIZE): no leak check at exit for vtrun. LuaJIT allocates Lua
// objects with its own mmap-based allocator, which LeakSanitizer does not scan, so every C++
// object that only Lua userdata points to (tensors, data sets, stores) would be reported as
// leaked. vt_tests keeps the leak check. ASAN_OPTIONS in the environment still overrides this.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

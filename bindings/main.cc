// vtrun: the executable. Everything happens in bindings/host.cc.
#include "bindings/host.h"

int main(int argc, char** argv) { return vt::lua::HostMain(argc, argv); }

// Placeholder: the real demo replaces this file.
#include <cstdio>

int main() {
  std::puts("streampool demo placeholder");
  return 0;
}

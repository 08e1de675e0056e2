// Embedding streampool under another runtime's streams: the example adapter
// in thread_stream_adapter.h plays the native runtime. The embedder launches
// its own work on native streams and asks streampool for memory; streampool
// records native markers and waits so its reuse rules see native ordering.
#include <cstdio>
#include <cstring>
#include <memory>

#include "examples/thread_stream_adapter.h"
#include "streampool/runtime.h"

int main() {
  streampool::RuntimeConfig config;
  config.adapter = std::make_shared<example::ThreadStreams>();
  auto rt = streampool::Runtime::Create(config);
  if (!rt.ok()) return 1;
  auto producer = (*rt)->CreateStream(0);
  auto consumer = (*rt)->CreateStream(0);
  auto ready = (*rt)->CreateEvent();
  if (!producer.ok() || !consumer.ok() || !ready.ok()) return 1;
  auto native = [&](streampool::StreamId s) {
    return static_cast<example::ThreadStreams::Stream*>(*(*rt)->NativeStream(s));
  };

  int sum = 0;
  auto buf = (*rt)->MallocAsync(1024, *producer);  // stream-ordered allocation
  if (!buf.ok()) return 1;
  char* p = static_cast<char*>(buf->ptr);
  native(*producer)->Launch([p] { std::memset(p, 1, 1024); });    // native "kernel"
  if (!(*rt)->RecordEvent(*ready, *producer).ok()) return 1;      // native record
  if (!(*rt)->StreamWaitEvent(*consumer, *ready).ok()) return 1;  // native wait
  native(*consumer)->Launch([p, &sum] {
    for (int i = 0; i < 1024; ++i) sum += p[i];
  });
  if (!(*rt)->FreeAsync(p, *consumer).ok()) return 1;  // freed in consumer order
  if (!(*rt)->StreamSynchronize(*consumer).ok()) return 1;
  std::printf("consumer read %d bytes of 1 written by the producer\n", sum);
  return sum == 1024 ? 0 : 1;
}

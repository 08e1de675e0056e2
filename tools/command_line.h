// The tools' command lines: absl::flags, parsed by absl::ParseCommandLine,
// with exit statuses a script can tell apart.
//
// absl::ParseCommandLine ends the process with status 1 both after printing
// --help and after a bad flag, which would make a bad command line look like
// a failed run. Here --help exits 0 and a bad command line 2, after the
// synopsis; 1 stays what the tool itself failed at. -h is --help.
#ifndef STREAMPOOL_TOOLS_COMMAND_LINE_H_
#define STREAMPOOL_TOOLS_COMMAND_LINE_H_

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace streampool::tools {

struct CommandLine {
  // The tool's name, as messages start ("streampool-replay").
  const char* program;
  // One line: "streampool-replay [flags] TRACE...".
  const char* synopsis;
  // absl::SetProgramUsageMessage's text, which --help prints after
  // "<program>: ", before the flags: what the tool does and its arguments.
  const char* usage;
  // The tool's source file: --help lists the flags defined there.
  const char* source_file;
  // Arguments that stand for others ("--no-check" for "--nocheck").
  std::vector<std::pair<absl::string_view, absl::string_view>> aliases;
};

namespace command_line_internal {

struct ParseExit {
  int status = -1;  // what a std::exit during parsing becomes; -1: not parsing
  const char* synopsis = "";
};

inline ParseExit& CurrentParse() {
  static ParseExit parse;
  return parse;
}

inline void EndParse() {
  const ParseExit& parse = CurrentParse();
  if (parse.status < 0) return;
  std::cout.flush();
  std::fflush(stdout);
  if (parse.status != 0)
    std::fprintf(stderr, "usage: %s  (--help lists the flags)\n", parse.synopsis);
  std::_Exit(parse.status);
}

inline bool AsksForHelp(absl::string_view arg) {
  return arg == "--help" || arg == "--helpfull" || arg == "--helpshort" || arg == "--helppackage" ||
         arg == "--version" || absl::StartsWith(arg, "--help=") ||
         absl::StartsWith(arg, "--helpon=") || absl::StartsWith(arg, "--helpmatch=");
}

}  // namespace command_line_internal

// Parses the flags out of argv and returns the other arguments, argv[0] not
// among them. Ends the process after --help (status 0) and on a bad flag
// (status 2).
inline std::vector<std::string> ParseCommandLine(int argc, char** argv,
                                                 const CommandLine& command_line) {
  namespace internal = command_line_internal;
  absl::SetProgramUsageMessage(command_line.usage);
  absl::FlagsUsageConfig config;
  const std::string source = command_line.source_file;
  config.contains_help_flags = [source](absl::string_view file) {
    return absl::EndsWith(file, source);
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  config.normalize_filename = [source](absl::string_view file) {
    return absl::EndsWith(file, source) ? source : std::string(file);
  };
  absl::SetFlagsUsageConfig(config);

  std::vector<std::string> args(argv, argv + argc);
  bool help = false;
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "-h") args[i] = "--help";
    for (const auto& [alias, flag] : command_line.aliases) {
      if (args[i] == alias) args[i] = std::string(flag);
    }
    help = help || internal::AsksForHelp(args[i]);
  }
  std::vector<char*> pointers;
  for (std::string& arg : args) pointers.push_back(arg.data());

  internal::ParseExit& parse = internal::CurrentParse();
  parse.synopsis = command_line.synopsis;
  parse.status = help ? 0 : 2;
  static const bool registered = std::atexit(&internal::EndParse) == 0;
  (void)registered;
  std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());
  parse.status = -1;
  return std::vector<std::string>(rest.begin() + 1, rest.end());
}

// For what the flags cannot check alone (a missing argument, flags that
// contradict each other): "<program>: <what>" and the synopsis on stderr,
// then exit status 2.
[[noreturn]] inline void UsageError(const CommandLine& command_line, absl::string_view what) {
  std::fprintf(stderr, "%s: %.*s\nusage: %s  (--help lists the flags)\n", command_line.program,
               static_cast<int>(what.size()), what.data(), command_line.synopsis);
  std::exit(2);
}

}  // namespace streampool::tools

#endif  // STREAMPOOL_TOOLS_COMMAND_LINE_H_

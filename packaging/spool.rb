# Homebrew cask for Spool.app: `brew install --cask ./packaging/spool.rb`,
# or from a tap that carries this file. The url is the DMG that the macOS
# workflow's release job (.github/workflows/macos.yml) publishes for tag
# v<version>: Spool-<version>-arm64.dmg, signed, notarized and stapled.
# At each release set version, and sha256 to the DMG's (the release job
# writes `shasum -a 256` of it into the job summary).
cask "spool" do
  version "0.1.0"
  sha256 :no_check

  url "https://github.com/spoolhq/spool/releases/download/v#{version}/Spool-#{version}-arm64.dmg"
  name "Spool"
  desc "Runs GLM-5.2 locally with an OpenAI- and Anthropic-compatible API"
  homepage "https://github.com/spoolhq/spool"

  depends_on arch: :arm64
  depends_on macos: ">= :big_sur"

  app "Spool.app"
  binary "#{appdir}/Spool.app/Contents/MacOS/spool"

  uninstall quit: "com.spoolhq.spool"

  # The downloaded model (in the Hugging Face cache) is the user's and is
  # left alone.
  zap trash: [
    "~/Library/Application Support/Spool",
    "~/Library/Caches/Spool",
  ]
end

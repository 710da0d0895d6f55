#Requires -RunAsAdministrator
<#
.SYNOPSIS
Installs edgeagent as a Windows service, or upgrades an installed one.

.DESCRIPTION
Run from the unpacked release zip, in an elevated PowerShell (5.1 or 7):

  1. copies edgeagent.exe to C:\Program Files\edgeagent, where only
     administrators can change it;
  2. creates C:\ProgramData\edgeagent and its logs folder with a protected
     ACL: full control for SYSTEM and Administrators, modify for the service
     account when -User is given, nothing for anyone else;
  3. copies the example configuration to config.yaml.example, and to
     config.yaml when there is none;
  4. registers the service with "edgeagent.exe install", which also sets the
     event log source, a delayed automatic start and the preshutdown
     timeout;
  5. sets the recovery actions with sc.exe (restart after 5 s, 30 s, then
     60 s; reset after a day; also on a stop with an error) and makes sure
     the event log source exists;
  6. with -Start, checks the configuration and starts the service.

When the service is already installed, the script upgrades it instead:
it stops the service (waiting for the drain), replaces the program, and
starts it again if it was running.

.PARAMETER User
The account the service runs as. Default LocalSystem. Virtual and managed
accounts (NT AUTHORITY\LocalService, NT SERVICE\...) need no password; for a
local or domain user the script asks for it.

.PARAMETER Start
Start the service once installed, after "edgeagent.exe config validate"
accepts the configuration.

.EXAMPLE
.\install.ps1
.\install.ps1 -User 'NT AUTHORITY\LocalService' -Start
#>
[CmdletBinding()]
param(
    [string]$User = '',
    [switch]$Start
)

$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest

$Name = 'edgeagent'
$ProgramDir = Join-Path $env:ProgramFiles $Name
$Exe = Join-Path $ProgramDir 'edgeagent.exe'
$DataDir = Join-Path $env:ProgramData $Name
$LogDir = Join-Path $DataDir 'logs'
$Config = Join-Path $DataDir 'config.yaml'
$Example = Join-Path $PSScriptRoot 'examples\agent.yaml'

# Recovery actions, in milliseconds; the same as installer.RecoveryDelays.
$RecoveryActions = 'restart/5000/restart/30000/restart/60000'
$RecoveryReset = 86400 # seconds

function Invoke-Native {
    param([string]$File, [string[]]$Arguments)
    & $File @Arguments
    if ($LASTEXITCODE -ne 0) {
        throw "$File $($Arguments -join ' ') failed with exit code $LASTEXITCODE"
    }
}

$source = Join-Path $PSScriptRoot 'edgeagent.exe'
if (-not (Test-Path $source)) {
    throw "edgeagent.exe not found beside this script ($PSScriptRoot)"
}

# Upgrade: stop, replace the program, start again.
$service = Get-Service -Name $Name -ErrorAction SilentlyContinue
if ($service) {
    $wasRunning = $service.Status -eq 'Running'
    if ($wasRunning) {
        Write-Host "Stopping $Name (running jobs drain first)..."
        Invoke-Native $Exe @('stop')
    }
    Copy-Item -Force $source $Exe
    Write-Host "Upgraded $Exe to: $(& $Exe version)"
    if ($wasRunning) {
        Invoke-Native $Exe @('start')
    }
    return
}

# 1. The program.
New-Item -ItemType Directory -Force -Path $ProgramDir | Out-Null
Copy-Item -Force $source $Exe

# 2. The data folder: SYSTEM (S-1-5-18) and Administrators (S-1-5-32-544)
# only, plus the service account; what is inside inherits it.
New-Item -ItemType Directory -Force -Path $DataDir, $LogDir | Out-Null
$grants = @('*S-1-5-18:(OI)(CI)F', '*S-1-5-32-544:(OI)(CI)F')
if ($User) {
    $grants += "${User}:(OI)(CI)M"
}
Invoke-Native icacls.exe (@($DataDir, '/inheritance:r', '/grant:r') + $grants + @('/Q'))
Invoke-Native icacls.exe @("$DataDir\*", '/reset', '/T', '/Q')

# 3. The configuration.
Copy-Item -Force $Example (Join-Path $DataDir 'config.yaml.example')
$exampleConfig = $false
if (-not (Test-Path $Config)) {
    Copy-Item $Example $Config
    $exampleConfig = $true
}

# 4. The service.
$installArgs = @('install', '--config', $Config)
if ($User) {
    $installArgs += @('--user', $User)
    if ($User -notmatch '^(NT AUTHORITY|NT SERVICE)\\') {
        $secure = Read-Host -AsSecureString "Password of $User"
        $bstr = [Runtime.InteropServices.Marshal]::SecureStringToBSTR($secure)
        try {
            $env:EDGEAGENT_SERVICE_PASSWORD = [Runtime.InteropServices.Marshal]::PtrToStringBSTR($bstr)
        } finally {
            [Runtime.InteropServices.Marshal]::ZeroFreeBSTR($bstr)
        }
    }
}
try {
    Invoke-Native $Exe $installArgs
} finally {
    Remove-Item Env:EDGEAGENT_SERVICE_PASSWORD -ErrorAction SilentlyContinue
}

# 5. Recovery actions and the event log source.
Invoke-Native sc.exe @('failure', $Name, 'reset=', "$RecoveryReset", 'actions=', $RecoveryActions)
Invoke-Native sc.exe @('failureflag', $Name, '1')
if (-not [System.Diagnostics.EventLog]::SourceExists($Name)) {
    [System.Diagnostics.EventLog]::CreateEventSource($Name, 'Application')
}

# 6. Start, or say what is next.
if ($Start -and -not $exampleConfig) {
    Invoke-Native $Exe @('config', 'validate', '-c', $Config)
    Invoke-Native $Exe @('start')
    Write-Host "$Name is running. Log: $LogDir\edgeagent.log"
    return
}
Write-Host ''
Write-Host "$Name is installed but not started. Next:"
if ($exampleConfig) {
    Write-Host "  1. Edit $Config (it is a copy of the example): agent_id, nats, storage."
} else {
    Write-Host "  1. Check $Config."
}
Write-Host "  2. & '$Exe' config validate"
Write-Host "  3. & '$Exe' start"
Write-Host "Log: $LogDir\edgeagent.log and the Application event log (source $Name)."
